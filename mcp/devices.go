package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/words"
)

// DevicesResult is list_devices' structured result.
type DevicesResult struct {
	Devices []api.Device `json:"devices"`
	// Current is the device this connection's tools act on, when it is
	// known: named, or the only one.
	Current string `json:"current,omitempty"`
}

func (c *callConn) listDevices(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) *sdk.CallToolResult {
	devs, err := c.lane.Devices(ctx)
	if err != nil {
		return callFailed(ctx, "", err)
	}
	r := DevicesResult{Devices: devs}
	if r.Devices == nil {
		r.Devices = []api.Device{}
	}
	if d, err := c.target.device(ctx); err == nil {
		r.Current = d.DeviceID
	}
	var b strings.Builder
	fmt.Fprintln(&b, words.Count(len(devs), "device", "devices"))
	for _, d := range devs {
		state := "offline"
		switch {
		case d.Revoked:
			state = "revoked"
		case d.Online:
			state = "online"
		}
		mark := ""
		if d.DeviceID == r.Current {
			mark = " (these tools act on it)"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s/%s\t%s\t%s%s\n", d.DeviceID, orDash(d.DisplayName), d.PlatformOS, d.PlatformArch, state, d.WorkspaceRoot, mark)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}, StructuredContent: r}
}
