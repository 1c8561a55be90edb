package store

import "github.com/uptrace/bun/dialect/pgdialect"

// BindArgs adapts compiled query arguments (querybuilder.Query.Args) to bun: bun
// renders a bare Go slice as JSON, so slices go in as PostgreSQL arrays.
func BindArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch a.(type) {
		case []string, []int64, []float64:
			out[i] = pgdialect.Array(a)
		default:
			out[i] = a
		}
	}
	return out
}
