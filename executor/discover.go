package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sema-agent/sema/api"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// discover reads wsPath from GET /v1/capabilities (never hard-coded, §1)
// and returns the WebSocket URL: ws:// for an http:// lane, wss:// for
// https://.
func (rt *Runtime) discover(ctx context.Context) (string, error) {
	base := strings.TrimRight(rt.cfg.Server, "/")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/capabilities", nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("capabilities: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("capabilities: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("capabilities: the lane answered %d", resp.StatusCode)
	}
	var body struct {
		DeviceExecutor json.RawMessage `json:"deviceExecutor"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", fmt.Errorf("capabilities: %w", err)
	}
	if string(body.DeviceExecutor) == "false" || len(body.DeviceExecutor) == 0 {
		return "", fmt.Errorf("capabilities: this deployment does not run the device lane (deviceExecutor is false)")
	}
	var c api.Capabilities
	if err := json.Unmarshal(body.DeviceExecutor, &c); err != nil {
		return "", fmt.Errorf("capabilities: deviceExecutor: %w", err)
	}
	if !c.Enabled || !strings.HasPrefix(c.WSPath, "/") {
		return "", fmt.Errorf("capabilities: the device lane is not enabled or has no wsPath")
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL scheme %q is not http or https", u.Scheme)
	}
	ws, err := url.Parse(c.WSPath)
	if err != nil || ws.Host != "" || ws.Scheme != "" {
		return "", fmt.Errorf("capabilities: wsPath %q is not a path", c.WSPath)
	}
	u.Path = strings.TrimRight(u.Path, "/") + ws.Path
	u.RawQuery = ws.RawQuery
	return u.String(), nil
}
