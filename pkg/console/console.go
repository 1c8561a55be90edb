// Package console holds the web console (API.md §14): static files embedded in the
// binary (index.html, app.js, style.css and the vendored uPlot), nothing else. The
// page calls the public API with the user's token like any other client.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// csp keeps the page to this server: no CDN, font or script from anywhere else.
// uPlot sets inline styles on the elements it draws.
const csp = "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves the console under /console/: the page for /console and /console/,
// the file named otherwise.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	server := http.FileServer(http.FS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, "/console")), "/")
		if name == "" || name == "." {
			name = "index.html"
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		if name == "index.html" {
			r2.URL.Path = "/" // FileServer serves index.html for the directory, without a redirect
		}
		server.ServeHTTP(w, r2)
	})
}
