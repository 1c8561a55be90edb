package querybuilder

import (
	"testing"
	"time"
)

func TestInline(t *testing.T) {
	q := Query{
		SQL:  "SELECT ? AS a, '?' AS literal_mark, ? AS b, ? AS c, ? AS d, ? AS e",
		Args: []any{"o'hara; DROP TABLE x", int64(7), 1.5, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), []string{"x", "y'"}},
	}
	got, err := q.Inline()
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT 'o''hara; DROP TABLE x' AS a, '?' AS literal_mark, 7 AS b, 1.5 AS c, '2026-01-02 03:04:05Z'::timestamptz AS d, ARRAY['x','y''']::text[] AS e"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := (Query{SQL: "SELECT ?", Args: nil}).Inline(); err == nil {
		t.Fatal("missing argument accepted")
	}
}
