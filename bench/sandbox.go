package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"
)

// ServeVariant is one way to run the device's serve: a sema binary and
// its flags.
type ServeVariant struct {
	Name  string
	Bin   string // "" for the UserPath's own
	Flags []string
}

// SandboxTrips measures `exec true` round trips through the HTTP API with
// the device's serve restarted, round after round, as each variant, trips
// per round: the same lane, the same device and the same client, only the
// serve differs. It returns the trips of each variant by name.
func SandboxTrips(ctx context.Context, u *UserPath, variants []ServeVariant, rounds, trips int) (map[string][]time.Duration, error) {
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	out := map[string][]time.Duration{}
	for r := 0; r < rounds; r++ {
		for _, v := range variants {
			bin := v.Bin
			if bin == "" {
				bin = u.Bin
			}
			if err := u.RestartServeWith(ctx, bin, v.Flags...); err != nil {
				return nil, fmt.Errorf("serve as %s: %w", v.Name, err)
			}
			for i := 0; i < trips/10+1; i++ { // warm: the first trips pay for the rules and the connection
				if _, err := instruct(ctx, hc, u, body); err != nil {
					return nil, err
				}
			}
			for i := 0; i < trips; i++ {
				t0 := time.Now()
				if _, err := instruct(ctx, hc, u, body); err != nil {
					return nil, fmt.Errorf("%s, trip %d: %w", v.Name, i+1, err)
				}
				out[v.Name] = append(out[v.Name], time.Since(t0))
			}
		}
	}
	return out, nil
}

// DevLoopStep is one step of an ordinary developer loop run through
// `sema run` in the device's workspace.
type DevLoopStep struct {
	Name, Script string
}

// DevLoop is an ordinary developer loop: a Go module made, put under git,
// committed, built and run, then tested.
var DevLoop = []DevLoopStep{
	{"make a module", `mkdir -p loop && cd loop && printf 'module loop\n\ngo 1.21\n' > go.mod && ` +
		`printf 'package main\n\nfunc main() { println(add(1, 2)) }\n\nfunc add(a, b int) int { return a + b }\n' > main.go && ` +
		`printf 'package main\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif add(1, 2) != 3 {\n\t\tt.Fatal("add")\n\t}\n}\n' > main_test.go`},
	{"git init, add, commit", `cd loop && git init -q && git add . && git -c user.name=sema -c user.email=sema@example.invalid commit -q -m first && git log --oneline | wc -l`},
	{"go build and run", `cd loop && go build -o loop . && ./loop`},
	{"go test", `cd loop && go test -count=1 ./...`},
	{"git status after a change", `cd loop && echo '// more' >> main.go && git status --short`},
	{"clean up", `rm -rf loop`},
}

// RunDevLoop runs the loop through `sema run` and returns, for each step,
// its time and, when it failed, what it said.
func RunDevLoop(ctx context.Context, u *UserPath) ([]time.Duration, []error) {
	times := make([]time.Duration, len(DevLoop))
	errs := make([]error, len(DevLoop))
	for i, step := range DevLoop {
		var out bytes.Buffer
		cmd := u.Sema(ctx, "run", "--timeout", "5m", "--", step.Script)
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		times[i] = time.Since(t0)
		if err != nil {
			errs[i] = fmt.Errorf("%v: %s", err, tail(out.Bytes(), 400))
		}
	}
	return times, errs
}
