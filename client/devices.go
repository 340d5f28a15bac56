package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// Revoke revokes a device for good (POST /v1/devices/{id}/revoke) and
// returns it as revoked.
func (c *Client) Revoke(ctx context.Context, deviceID string) (api.Device, error) {
	var d api.Device
	err := c.call(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/revoke", struct{}{}, &d)
	return d, err
}

// Rename sets a device's display name (POST /v1/devices/{id}/rename) and
// returns the device renamed.
func (c *Client) Rename(ctx context.Context, deviceID, name string) (api.Device, error) {
	var d api.Device
	err := c.call(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/rename", api.RenameDeviceRequest{DisplayName: name}, &d)
	return d, err
}

// Forget removes a revoked device from the registry
// (POST /v1/devices/{id}/forget) and returns it as it was.
func (c *Client) Forget(ctx context.Context, deviceID string) (api.Device, error) {
	var d api.Device
	err := c.call(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(deviceID)+"/forget", struct{}{}, &d)
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

// ChooseError is a device choice that cannot be made: no device with the
// id or the name Wanted, several with that name (Ambiguous: their ids), or
// (Wanted "") not exactly one live device.
type ChooseError struct {
	Wanted    string   // the id or name asked for; "" when none was
	Ambiguous []string // the ids of the devices named Wanted, when more than one is
	Live      int      // how many devices are not revoked
}

func (e *ChooseError) Error() string {
	switch {
	case len(e.Ambiguous) > 0:
		return fmt.Sprintf("%d of your devices are named %q: name one by its id (%s)", len(e.Ambiguous), e.Wanted, strings.Join(e.Ambiguous, ", "))
	case e.Wanted != "":
		return fmt.Sprintf("you have no device %q", e.Wanted)
	case e.Live == 0:
		return "you have no enrolled device"
	}
	return fmt.Sprintf("you have %s: name one", words.Count(e.Live, "device", "devices"))
}

// ChooseDevice picks from an identity's devices the one with the id want,
// else the one whose name is want (a device that is not revoked first),
// or, when want is "", the only one that is not revoked; otherwise a
// *ChooseError.
func ChooseDevice(devs []api.Device, want string) (api.Device, error) {
	var live, named, liveNamed []api.Device
	for _, d := range devs {
		if want != "" && d.DeviceID == want {
			return d, nil
		}
		if want != "" && d.DisplayName == want {
			named = append(named, d)
			if !d.Revoked {
				liveNamed = append(liveNamed, d)
			}
		}
		if !d.Revoked {
			live = append(live, d)
		}
	}
	if len(liveNamed) > 0 {
		named = liveNamed
	}
	switch {
	case want == "" && len(live) == 1:
		return live[0], nil
	case len(named) == 1:
		return named[0], nil
	}
	e := &ChooseError{Wanted: want, Live: len(live)}
	for _, d := range named {
		e.Ambiguous = append(e.Ambiguous, d.DeviceID)
	}
	return api.Device{}, e
}

// IsDeviceID reports whether s is spelled as the lane's device ids are
// (dev_ and a ULID): anything else names a device by its name.
func IsDeviceID(s string) bool {
	rest, ok := strings.CutPrefix(s, "dev_")
	return ok && protocol.ValidULID(rest)
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
