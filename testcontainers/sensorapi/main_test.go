package sensorapi_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sensordata/sensorapi/testcontainers/sensorapi"
)

// TestMain builds the image from this checkout first, so that the tests run the code
// under test rather than an older sensorapi:latest left on the machine.
func TestMain(m *testing.M) {
	if err := sensorapi.BuildImage(context.Background(), sensorapi.DefaultImage); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
