// Package model holds the bun models of the CRUD resources and their JSON response
// shapes.
package model

import "time"

// Timestamp renders record times as the spec wants: ISO 8601 UTC, microseconds, Z.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// NullableTimestamp renders nil as JSON null.
func NullableTimestamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Timestamp(*t)
	return &s
}

// nonNil renders a nil slice as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
