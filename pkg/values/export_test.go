package values

// SetExportPage sets the export's page size until the returned function restores it,
// so that a test crosses page boundaries with few values.
func SetExportPage(n int) (restore func()) {
	old := exportPage
	exportPage = n
	return func() { exportPage = old }
}

// TiledBeside tells whether the staging's minute tiles came from its tiler (tiler.go).
func TiledBeside(s *Staging) bool { return s.tiled }
