package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/sema-agent/sema/api"
)

// Revoke revokes a device for good (POST /v1/devices/{id}/revoke) and
// returns it as revoked.
func (c *Client) Revoke(ctx context.Context, deviceID string) (api.Device, error) {
	var d api.Device
	err := c.call(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/revoke", struct{}{}, &d)
	return d, err
}

// EnrollToken issues a one-shot enrollment token
// (POST /v1/devices/enroll-tokens).
func (c *Client) EnrollToken(ctx context.Context) (api.EnrollTokenResponse, error) {
	var tok api.EnrollTokenResponse
	err := c.call(ctx, http.MethodPost, "/v1/devices/enroll-tokens", nil, &tok)
	return tok, err
}

// Cancel asks the lane to cancel an instruction
// (POST /v1/instructions/{id}/cancel): idempotent, also after it settled.
// Its outcome comes down the instruction's own stream.
func (c *Client) Cancel(ctx context.Context, instructionID string) error {
	var out api.CancelResponse
	return c.call(ctx, http.MethodPost, "/v1/instructions/"+url.PathEscape(instructionID)+"/cancel", struct{}{}, &out)
}

// ChooseError is a device choice that cannot be made: no device named
// Wanted, or (Wanted "") not exactly one live device.
type ChooseError struct {
	Wanted string // the id asked for; "" when none was
	Live   int    // how many devices are not revoked
}

func (e *ChooseError) Error() string {
	switch {
	case e.Wanted != "":
		return fmt.Sprintf("you have no device %q", e.Wanted)
	case e.Live == 0:
		return "you have no enrolled device"
	}
	return fmt.Sprintf("you have %d devices: name one", e.Live)
}

// ChooseDevice picks from an identity's devices the one with id, or, when id
// is "", the only one that is not revoked; otherwise a *ChooseError.
func ChooseDevice(devs []api.Device, id string) (api.Device, error) {
	var live []api.Device
	for _, d := range devs {
		if id != "" && d.DeviceID == id {
			return d, nil
		}
		if !d.Revoked {
			live = append(live, d)
		}
	}
	if id == "" && len(live) == 1 {
		return live[0], nil
	}
	return api.Device{}, &ChooseError{Wanted: id, Live: len(live)}
}

// DevicePath makes p absolute on the device: the lane takes absolute,
// normalized POSIX paths only, so a relative one is joined to the device's
// workspace root (as the lane's sessions resolve them), never expanded.
func DevicePath(dev api.Device, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = path.Join(dev.WorkspaceRoot, p)
	}
	return path.Clean(p)
}
