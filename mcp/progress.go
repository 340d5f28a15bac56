package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// progress sends a command's live output as progress notifications, when
// the call carried a progress token: each notification's message is the
// output that came, its progress the bytes so far. Past the cap of text a
// client was sent, notifications carry the count only, one per
// progressQuietEvery bytes, so a flood of output does not flood the client.
type progress struct {
	ctx     context.Context
	session *sdk.ServerSession
	token   any
	sent    int64 // output bytes sent as text
	limit   int64
	quietAt int64 // the next count to report past the limit
}

const (
	progressTextLimit  = 1 << 20
	progressQuietEvery = 1 << 20
	// progressMessageMax bounds one notification's text.
	progressMessageMax = 64 << 10
)

// progressOf returns the call's progress reporter; nil (which reports
// nothing) when the client asked for none.
func progressOf(ctx context.Context, req *sdk.CallToolRequest) *progress {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return &progress{ctx: ctx, session: req.Session, token: token, limit: progressTextLimit}
}

func (p *progress) output(kind protocol.ChunkKind, data []byte, total int64) {
	if p == nil {
		return
	}
	n := &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(total)}
	switch {
	case p.sent < p.limit:
		text := data[:min(len(data), progressMessageMax, int(p.limit-p.sent))]
		p.sent += int64(len(text))
		n.Message = validUTF8(string(text))
		if kind == protocol.ChunkStderr {
			n.Message = "[stderr] " + n.Message
		}
	case total >= p.quietAt:
		p.quietAt = total + progressQuietEvery
		n.Message = fmt.Sprintf("[%s of output so far; the live view stopped at %d]", words.Bytes(total), p.limit)
	default:
		return
	}
	// A lost notification loses nothing: the result carries the output.
	_ = p.session.NotifyProgress(p.ctx, n)
}
