package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sema-agent/sema/api"
)

// Identities lists every identity (GET /v1/identities); only the lane's
// admin may (others get ErrForbidden).
func (c *Client) Identities(ctx context.Context) ([]api.Identity, error) {
	var out api.IdentityList
	err := c.call(ctx, http.MethodGet, "/v1/identities", nil, &out)
	return out.Identities, err
}

// CreateIdentity creates an identity (POST /v1/identities), the admin's
// right. The answer's APIKey is the new identity's key, shown this once.
func (c *Client) CreateIdentity(ctx context.Context, name string) (api.CreateIdentityResponse, error) {
	var out api.CreateIdentityResponse
	err := c.call(ctx, http.MethodPost, "/v1/identities", api.CreateIdentityRequest{Name: name}, &out)
	return out, err
}

// APIKeys lists the caller's keys that are not revoked (GET /v1/api-keys),
// never the keys themselves.
func (c *Client) APIKeys(ctx context.Context) ([]api.APIKey, error) {
	var out api.APIKeyList
	err := c.call(ctx, http.MethodGet, "/v1/api-keys", nil, &out)
	return out.APIKeys, err
}

// CreateAPIKey issues another key for the caller (POST /v1/api-keys); the
// answer's APIKey is shown this once.
func (c *Client) CreateAPIKey(ctx context.Context) (api.CreateAPIKeyResponse, error) {
	var out api.CreateAPIKeyResponse
	err := c.call(ctx, http.MethodPost, "/v1/api-keys", nil, &out)
	return out, err
}

// RevokeAPIKey revokes a key (DELETE /v1/api-keys/{keyId}): the caller's
// own, or, for the admin, any. Another identity's key is ErrAPIKeyNotFound;
// the admin's last key is ErrLastAdminKey.
func (c *Client) RevokeAPIKey(ctx context.Context, keyID string) (api.APIKey, error) {
	var out api.APIKey
	err := c.call(ctx, http.MethodDelete, "/v1/api-keys/"+url.PathEscape(keyID), nil, &out)
	return out, err
}

// Session returns the device a root session is bound to
// (GET /v1/sessions/{rootSessionId}); ErrSessionNotFound when unbound.
func (c *Client) Session(ctx context.Context, rootSessionID string) (api.Session, error) {
	var out api.Session
	err := c.call(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(rootSessionID), nil, &out)
	return out, err
}

// Rebind binds a root session to a device, replacing its binding
// (POST /v1/sessions/{rootSessionId}/rebind, §9): the one way to change a
// session's device.
func (c *Client) Rebind(ctx context.Context, rootSessionID, deviceID string) (api.Session, error) {
	var out api.Session
	err := c.call(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(rootSessionID)+"/rebind", api.RebindRequest{DeviceID: deviceID}, &out)
	return out, err
}

// WhoAmI is the caller's own identity (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (api.Identity, error) {
	var out api.Identity
	err := c.call(ctx, http.MethodGet, "/v1/whoami", nil, &out)
	return out, err
}

// SetIdentityDisabled disables an identity, whose keys are then refused at
// once, or enables it again (POST /v1/identities/{id}/disable, /enable;
// the admin's right).
func (c *Client) SetIdentityDisabled(ctx context.Context, id string, disabled bool) (api.Identity, error) {
	verb := "enable"
	if disabled {
		verb = "disable"
	}
	var out api.Identity
	err := c.call(ctx, http.MethodPost, "/v1/identities/"+url.PathEscape(id)+"/"+verb, struct{}{}, &out)
	return out, err
}
