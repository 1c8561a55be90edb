// Package analytics parses and validates the bodies of the analytics endpoints
// (statistics E7, resample E8, aggregation E9) into querybuilder requests, compiles
// them (one path per endpoint, compile.go), and shapes the rows the compiled
// statements return into response bodies. It has no HTTP or
// database dependency, so `sensorapi compile` shares it with the handlers.
package analytics

import "github.com/shopspring/decimal"

// Round rounds half away from zero to places decimals, on the shortest decimal form of
// v (so 1.005 rounds to 1.01, as a person reading the number expects, not to 1.00 as
// binary arithmetic on 1.00499999... would). places < 0 means full precision.
func Round(v float64, places int) float64 {
	if places < 0 {
		return v
	}
	f, _ := decimal.NewFromFloat(v).Round(int32(places)).Float64()
	return f
}

// roundPtr rounds a nullable value; nil stays nil (JSON null).
func roundPtr(x *float64, places int) *float64 {
	if x == nil {
		return nil
	}
	r := Round(*x, places)
	return &r
}
