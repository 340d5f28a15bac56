package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sema-agent/sema/api"
)

// DevicesOptions chooses a page of GET /v1/devices.
type DevicesOptions struct {
	// Limit is the most devices of a page, 1 to 1000; 0 for the lane's
	// default (500).
	Limit int
	// After is the Next of the page before; "" for the first page.
	After string
	// Online lists only the devices connected to the answering lane server
	// (presence is per replica).
	Online bool
}

// query is the options as GET /v1/devices' query string, "" for none.
func (o DevicesOptions) query() string {
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Online {
		q.Set("online", "true")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// DevicesPage reads one page of the caller's devices, oldest first
// (GET /v1/devices); its Next, when not "", is the After of the next page.
func (c *Client) DevicesPage(ctx context.Context, opts DevicesOptions) (api.DeviceList, error) {
	var out api.DeviceList
	err := c.call(ctx, http.MethodGet, "/v1/devices"+opts.query(), nil, &out)
	return out, err
}

// AllDevices reads the pages from opts.After to the end, following next,
// and returns their devices in order.
func (c *Client) AllDevices(ctx context.Context, opts DevicesOptions) ([]api.Device, error) {
	all := []api.Device{}
	for {
		page, err := c.DevicesPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Devices...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next == opts.After || len(page.Devices) == 0 {
			// A next that does not move would be followed forever.
			return nil, fmt.Errorf("the lane's device list does not advance: next %q after %q", page.Next, opts.After)
		}
		opts.After = page.Next
	}
}

// Devices lists every device of the caller, oldest first: it follows the
// pages of GET /v1/devices to the end.
func (c *Client) Devices(ctx context.Context) ([]api.Device, error) {
	return c.AllDevices(ctx, DevicesOptions{})
}
