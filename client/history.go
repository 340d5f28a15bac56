package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sema-agent/sema/api"
)

// HistoryOptions chooses a page of the instruction history
// (GET /v1/instructions); zero fields choose everything.
type HistoryOptions struct {
	Device   string // a device id
	Session  string // a root session id
	Outcome  string // ok, cancelled:<state>, or an errorCode
	Identity string // the admin's choice of identity
	Since    time.Time
	Until    time.Time
	// Cursor is the Next (or the Cursor) of an earlier page; "" for the
	// oldest row.
	Cursor string
	Limit  int // 1 to 1000; 0 for the lane's default (500)
}

// query is the options as the query string, "" for none.
func (o HistoryOptions) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"device": o.Device, "session": o.Session, "outcome": o.Outcome, "identity": o.Identity, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// HistoryPage reads one page of the instruction history, oldest first: the
// caller's own, or, for the admin, anyone's. Its Next, when not "", is the
// Cursor of the next page; its Cursor, passed later, returns the rows
// settled since.
func (c *Client) HistoryPage(ctx context.Context, opts HistoryOptions) (api.InstructionList, error) {
	var out api.InstructionList
	err := c.call(ctx, http.MethodGet, api.InstructionsPath+opts.query(), nil, &out)
	return out, err
}

// HistoryRecord reads one instruction's history row
// (GET /v1/instructions/{id}).
func (c *Client) HistoryRecord(ctx context.Context, instructionID string) (api.InstructionRecord, error) {
	var out api.InstructionRecord
	err := c.call(ctx, http.MethodGet, api.InstructionsPath+"/"+url.PathEscape(instructionID), nil, &out)
	return out, err
}
