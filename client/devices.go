package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sema-agent/sema/api"
)

// Devices lists the caller's devices (GET /v1/devices).
func (c *Client) Devices(ctx context.Context) ([]api.Device, error) {
	var out api.DeviceList
	err := c.call(ctx, http.MethodGet, "/v1/devices", nil, &out)
	return out.Devices, err
}

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
