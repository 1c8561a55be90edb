// Command buildimage builds the service image (make image): sensorapi.BuildImage, the
// one recipe that the testcontainers module uses too.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sensordata/sensorapi/testcontainers/sensorapi"
)

func main() {
	tag := "sensorapi:latest"
	if len(os.Args) > 1 {
		tag = os.Args[1]
	}
	if err := sensorapi.BuildImage(context.Background(), tag); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("built", tag)
}
