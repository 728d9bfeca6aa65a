// Command cg manages and runs partitioned consumer groups on NATS JetStream.
package main

import (
	"os"

	"github.com/cg-dev/cg/cmd"
)

func main() { os.Exit(cmd.Main()) }
