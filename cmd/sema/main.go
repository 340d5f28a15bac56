// Command sema is the device lane's CLI: `sema device enroll` and
// `sema device serve` on the user's machine.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sema-agent/sema/cmd/sema/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
