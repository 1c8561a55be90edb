package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/term"

	"github.com/sensordata/sensorapi/pkg/progress"
)

func importCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	base := fs.String("url", "", "the server (e.g. http://127.0.0.1:8080)")
	token := fs.String("token", os.Getenv("SENSORAPI_TOKEN"), "token (or SENSORAPI_TOKEN)")
	variable := fs.String("variable", "", "import into the variable with this id")
	device := fs.String("device", "", "import into --device/--var by labels (both created as needed)")
	varLabel := fs.String("var", "", "the variable label with --device")
	format := fs.String("format", "", "csv or ndjson (default: from the file name: .ndjson/.jsonl, else csv)")
	compress := fs.Bool("gzip", false, "compress the upload (a .gz file is sent as it is)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sensorapi import [flags] FILE

Uploads a history file to a running server's import route (API.md §21): one
transaction, every row or none. Without --variable or --device the file is a
collection: columns (or NDJSON fields) device,variable,timestamp,value[,context].
A CSV file has a header line naming timestamp,value[,context] (an export's
created_at column is ignored). A file ending in .gz is sent gzipped as it is.
Progress: a bar with rows/s, % and ETA on a terminal, else a line every 10 s.

Examples:
  sensorapi import --url http://127.0.0.1:8080 --token $TOKEN --device boiler --var temp history.csv
  sensorapi import --url http://127.0.0.1:8080 --variable 6a2e4d1b0c9f8e7d6c5b4a3f --gzip dots.ndjson
  sensorapi import --url http://127.0.0.1:8080 fleet.csv.gz

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *base == "" || *token == "" || (*device == "") != (*varLabel == "") || (*variable != "" && *device != "") {
		fs.Usage()
		return errors.New("import: want FILE, --url, --token, and at most one of --variable or --device with --var")
	}
	path, err := importPath(*variable, *device, *varLabel)
	if err != nil {
		return err
	}
	u := importUpload{file: fs.Arg(0), url: strings.TrimRight(*base, "/") + path, token: *token, format: *format, gzip: *compress}
	return u.run(ctx, os.Stderr)
}

// importPath is the route of the target.
func importPath(id, device, variable string) (string, error) {
	switch {
	case id != "":
		return "/api/v1.6/variables/" + url.PathEscape(id) + "/values/import", nil
	case device != "":
		return "/api/v1.6/devices/" + url.PathEscape(device) + "/" + url.PathEscape(variable) + "/values/import", nil
	}
	return "/api/v1.6/collections/values/import", nil
}

// importUpload is one file sent to one route.
type importUpload struct {
	file, url, token, format string
	gzip                     bool
}

// run sends the file, reporting progress to out, and prints the server's answer.
func (u importUpload) run(ctx context.Context, out io.Writer) error {
	f, err := os.Open(u.file)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	m := progress.NewMeter(info.Size())
	body, gzipped := u.body(f, m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, body)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if !u.gzip || strings.HasSuffix(strings.ToLower(u.file), ".gz") { // sent as it is: its size is known
		req.ContentLength = info.Size()
	}
	req.Header.Set("X-Auth-Token", u.token)
	req.Header.Set("Content-Type", u.mediaType())
	if gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	stop := showProgress(out, m, u.file)
	resp, err := http.DefaultClient.Do(req)
	stop()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("import: %s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	fmt.Printf("%s\n", bytes.TrimSpace(answer))
	return nil
}

// mediaType is the body's Content-Type: --format, else by the file's name.
func (u importUpload) mediaType() string {
	name := strings.TrimSuffix(strings.ToLower(u.file), ".gz")
	if u.format == "ndjson" || (u.format == "" && (strings.HasSuffix(name, ".ndjson") || strings.HasSuffix(name, ".jsonl"))) {
		return "application/x-ndjson"
	}
	return "text/csv"
}

// body is what is sent: the file as it is (counted), or gzipped on the fly with
// --gzip. Rows are counted as line ends of the text (of a .gz file: decompressed
// beside the upload); it tells whether the body is gzip.
func (u importUpload) body(f io.Reader, m *progress.Meter) (io.Reader, bool) {
	counted := &countingReader{r: f, m: m}
	if strings.HasSuffix(strings.ToLower(u.file), ".gz") {
		pr, pw := io.Pipe()
		go countGzipLines(pr, m)
		counted.lines = false
		return &closingTee{r: io.TeeReader(counted, pw), w: pw}, true
	}
	counted.lines = true
	if !u.gzip {
		return counted, false
	}
	pr, pw := io.Pipe()
	go func() {
		z := gzip.NewWriter(pw)
		_, err := io.Copy(z, counted)
		pw.CloseWithError(errors.Join(err, z.Close()))
	}()
	return pr, true
}

// countingReader counts the bytes read (and line ends, when lines) into m.
type countingReader struct {
	r     io.Reader
	m     *progress.Meter
	lines bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	var rows int64
	if c.lines {
		rows = int64(bytes.Count(p[:n], []byte{'\n'}))
	}
	c.m.Add(int64(n), rows)
	return n, err
}

// closingTee closes w when r ends, so the reader beside it ends too.
type closingTee struct {
	r io.Reader
	w *io.PipeWriter
}

func (t *closingTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil {
		_ = t.w.CloseWithError(err)
	}
	return n, err
}

// countGzipLines counts the line ends of the gzip stream r into m, and drains r
// whatever happens (the upload writes into it).
func countGzipLines(r io.Reader, m *progress.Meter) {
	defer func() { _, _ = io.Copy(io.Discard, r) }()
	z, err := gzip.NewReader(r)
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := z.Read(buf)
		m.Add(0, int64(bytes.Count(buf[:n], []byte{'\n'})))
		if err != nil {
			return
		}
	}
}

// showProgress draws a bar on a terminal (every 200 ms), else prints a line every 10 s
// (pkg/progress); the returned function ends it.
func showProgress(out io.Writer, m *progress.Meter, name string) func() {
	status := func() string { return m.Status("rows") }
	if f, ok := out.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		r := progress.New(out, "import", progress.Every)
		r.Begin("uploading "+name, status)
		return r.End
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			m.Draw(out, "rows")
			select {
			case <-done:
				m.Draw(out, "rows")
				_, _ = fmt.Fprintln(out)
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}
