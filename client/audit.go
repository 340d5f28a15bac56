package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sema-agent/sema/api"
)

// AuditOptions chooses a page of GET /v1/audit (the admin's only).
type AuditOptions struct {
	// Since, when not zero, starts at the rows written at or after it.
	Since time.Time
	// Event, when not "", selects one event's rows.
	Event string
	// Cursor is the Next of the page before; "" from the oldest row.
	Cursor string
	// Limit is the most rows of a page, 1 to 1000; 0 for the lane's
	// default (500).
	Limit int
}

func (o AuditOptions) query() string {
	q := url.Values{}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if o.Event != "" {
		q.Set("event", o.Event)
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// AuditPage reads one page of the audit trail, oldest first
// (GET /v1/audit). Its Next is where the rows after it begin: pass it as
// the Cursor of the next call, also when More is false, to wait for new
// rows.
func (c *Client) AuditPage(ctx context.Context, opts AuditOptions) (api.AuditPage, error) {
	var out api.AuditPage
	err := c.call(ctx, http.MethodGet, "/v1/audit"+opts.query(), nil, &out)
	return out, err
}

// AuditCheckpoint reads a chain's head (GET /v1/audit/checkpoint):
// api.ChainAudit's or api.ChainHistory's.
func (c *Client) AuditCheckpoint(ctx context.Context, chain string) (api.ChainHead, error) {
	var out api.ChainHead
	err := c.call(ctx, http.MethodGet, "/v1/audit/checkpoint?chain="+url.QueryEscape(chain), nil, &out)
	return out, err
}

// VerifyAudit has the lane recompute a chain (POST /v1/audit/verify) from
// a checkpoint (ChainHead.String), whose chain it is, or from the anchor
// of chain when from is "". A row that does not match is the answer's
// Problem, not an error.
func (c *Client) VerifyAudit(ctx context.Context, chain, from string) (api.ChainVerification, error) {
	var out api.ChainVerification
	err := c.call(ctx, http.MethodPost, "/v1/audit/verify", api.AuditVerifyRequest{Chain: chain, From: from}, &out)
	return out, err
}
