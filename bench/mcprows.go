package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Rows 6 and 6b: an MCP client's `run_command true` round trip, through a
// real `sema mcp` on stdio and through the real server's /v1/mcp (a
// stateless server per request), beside a local `sh -c true` in the same
// loop.
func mcpStdioTrue(ctx context.Context, e *Env) Measure {
	return e.mcpTrue(ctx, &sdk.CommandTransport{Command: e.U.Sema(ctx, "mcp")})
}

func mcpHTTPTrue(ctx context.Context, e *Env) Measure {
	hc := &http.Client{Transport: bearerTransport{key: e.U.Key, rt: e.HTTP.Transport}}
	return e.mcpTrue(ctx, &sdk.StreamableClientTransport{Endpoint: e.U.URL + "/v1/mcp?device=" + e.U.DeviceID, HTTPClient: hc})
}

func (e *Env) mcpTrue(ctx context.Context, tr sdk.Transport) Measure {
	ctx, cancel := within(ctx)
	defer cancel()
	fail := func(err error) Measure {
		return Measure{Lane: Result{Err: err}, Base: Result{Err: errors.New("not compared")}}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		return fail(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "true", "timeout_ms": 10000}}
	var lane, local []time.Duration
	for i := 0; i < e.Trips; i++ {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("the tool failed: %v", res.Content)
		}
		if err != nil {
			return fail(fmt.Errorf("trip %d: %v", i+1, err))
		}
		lane = append(lane, time.Since(t0))
		t0 = time.Now()
		if err := exec.CommandContext(ctx, "/bin/sh", "-c", "true").Run(); err != nil {
			return Measure{Lane: Result{Err: errors.New("not compared")}, Base: Result{Err: err}}
		}
		local = append(local, time.Since(t0))
	}
	return Measure{Lane: Result{Time: Quantile(lane, 0.5), P99: Quantile(lane, 0.99)}, Base: Result{Time: Quantile(local, 0.5), P99: Quantile(local, 0.99)},
		Note: fmt.Sprintf("%d trips", e.Trips)}
}

// bearerTransport adds the API key to every request.
type bearerTransport struct {
	key string
	rt  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}
