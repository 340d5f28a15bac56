package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	pathpkg "path"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

// PathArgs name one path: absolute, or relative to the workspace root.
type PathArgs struct {
	Path string `json:"path" jsonschema:"absolute, or relative to the device's workspace root"`
}

// ReadArgs are read_file's arguments.
type ReadArgs struct {
	Path           string `json:"path" jsonschema:"absolute, or relative to the device's workspace root"`
	Offset         *int64 `json:"offset,omitempty" jsonschema:"lines to skip first (default 0)"`
	Limit          *int64 `json:"limit,omitempty" jsonschema:"lines to return at most (default: to the end)"`
	MaxOutputBytes int64  `json:"max_output_bytes,omitempty" jsonschema:"bytes of content to return at most (default 262144, at most 16777216)"`
}

// ReadResult is read_file's structured result.
type ReadResult struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Bytes   int64  `json:"bytes"` // of content shown
	// Complete: the content is the whole file (or the whole range asked
	// for); otherwise reading stopped at the cap and NextOffset is the
	// first line not shown whole.
	Complete   bool   `json:"complete"`
	NextOffset *int64 `json:"nextOffset,omitempty"`
	// NotUTF8: the file is not UTF-8 text; invalid bytes show as U+FFFD.
	NotUTF8       bool   `json:"notUtf8,omitempty"`
	InstructionID string `json:"instructionId"`
}

// errEnough stops a read at the cap: the rest is not wanted.
var errEnough = errors.New("read_file: enough content for the cap")

func (c *callConn) readFile(ctx context.Context, _ *sdk.CallToolRequest, a ReadArgs) *sdk.CallToolResult {
	limit, bad := outputCap(a.MaxOutputBytes)
	switch {
	case bad != nil:
		return bad
	case a.Offset != nil && *a.Offset < 0:
		return invalid("offset %d is negative", *a.Offset)
	case a.Limit != nil && *a.Limit < 0:
		return invalid("limit %d is negative", *a.Limit)
	}
	if bad := c.holdOutput(ctx, limit, int64(limit)); bad != nil {
		return bad
	}
	dev, p, bad := c.resolve(ctx, a.Path)
	if bad != nil {
		return bad
	}
	kind, args := protocol.KindReadTextFile, any(protocol.PathArgs{Path: p})
	if a.Offset != nil || a.Limit != nil {
		kind, args = protocol.KindReadTextLines, protocol.ReadLinesArgs{Path: p, Offset: a.Offset, Limit: a.Limit}
	}
	var buf bytes.Buffer
	res, err := c.run(ctx, dev, kind, args, nil, func(b []byte) error {
		if room := limit + 1 - buf.Len(); room > 0 {
			buf.Write(b[:min(room, len(b))])
		}
		if buf.Len() > limit {
			return errEnough // one byte past the cap proves there is more
		}
		return nil
	})
	var stream *client.StreamError
	enough := errors.As(err, &stream) && errors.Is(err, errEnough)
	switch {
	case err != nil && !enough:
		return callFailed(ctx, dev.DeviceID, err)
	case !enough && !res.Outcome.OK:
		return outcomeFailed(dev.DeviceID, res, "")
	}
	r := readResult(p, buf.Bytes(), limit, !enough, a.Offset)
	r.InstructionID = res.ID
	if enough {
		r.InstructionID = stream.InstructionID
	}
	text := r.Content
	if !r.Complete {
		text += fmt.Sprintf("\n[… the file goes on past %s: read on with offset=%d]", words.Bytes(limit), *r.NextOffset)
	}
	if r.NotUTF8 {
		text += "\n[the file is not UTF-8 text: invalid bytes are shown as U+FFFD]"
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: r}
}

// readResult cuts content at the cap, at the end of its last whole line
// when there is one, so that NextOffset continues exactly.
func readResult(p string, content []byte, limit int, complete bool, offset *int64) ReadResult {
	r := ReadResult{Path: p, Complete: complete}
	if !complete {
		content = content[:limit]
		if i := bytes.LastIndexByte(content, '\n'); i >= 0 {
			content = content[:i+1]
		}
		next := int64(bytes.Count(content, []byte{'\n'}))
		if offset != nil {
			next += *offset
		}
		r.NextOffset = &next
	}
	r.NotUTF8 = !utf8.Valid(content)
	r.Content, r.Bytes = validUTF8(string(content)), int64(len(content))
	return r
}

// WriteArgs are write_file's arguments.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"absolute, or relative to the device's workspace root"`
	Content string `json:"content" jsonschema:"the file's whole new content (UTF-8 text)"`
}

// WriteResult is write_file's receipt.
type WriteResult struct {
	CanonicalPath string `json:"canonicalPath"`
	Bytes         int    `json:"bytes"`
	SHA256        string `json:"sha256"`
	Inode         string `json:"inode,omitempty"`
	Created       *bool  `json:"created,omitempty"`
	InstructionID string `json:"instructionId"`
}

func (c *callConn) writeFile(ctx context.Context, _ *sdk.CallToolRequest, a WriteArgs) *sdk.CallToolResult {
	dev, p, bad := c.resolve(ctx, a.Path)
	if bad != nil {
		return bad
	}
	content := []byte(a.Content)
	res, err := c.run(ctx, dev, protocol.KindWriteFile, api.WriteArgs{Path: p}, content, nil)
	if err == nil && res.Outcome.ErrorCode == protocol.ErrNotFound {
		// Its directory is missing (the write never began): make it, as an
		// editor's "save as" would, and write once more.
		dir, _ := pathpkg.Split(p)
		mk, mkErr := c.run(ctx, dev, protocol.KindCreateDir, protocol.DirArgs{Path: pathpkg.Clean(dir), Recursive: ptr(true)}, nil, nil)
		if mkErr == nil && mk.Outcome.OK {
			res, err = c.run(ctx, dev, protocol.KindWriteFile, api.WriteArgs{Path: p}, content, nil)
		}
	}
	if err != nil {
		return callFailed(ctx, dev.DeviceID, err)
	}
	if !res.Outcome.OK {
		return outcomeFailed(dev.DeviceID, res, "")
	}
	sum := sha256.Sum256(content)
	r := WriteResult{CanonicalPath: res.Outcome.CanonicalPath, Bytes: len(content), SHA256: hex.EncodeToString(sum[:]),
		Inode: res.Outcome.Inode, Created: res.Outcome.Created, InstructionID: res.ID}
	verb := "wrote"
	if r.Created != nil && *r.Created {
		verb = "created"
	}
	text := fmt.Sprintf("%s %s: %s, sha256 %s (verified on the device)", verb, r.CanonicalPath, words.Bytes(r.Bytes), r.SHA256)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: r}
}

// Entry is one file of list_directory and the answer of file_info.
type Entry struct {
	Name     string `json:"name,omitempty"`
	Path     string `json:"path"`
	Kind     string `json:"kind"` // file, dir, symlink, other
	Size     int64  `json:"size"`
	Mode     string `json:"mode,omitempty"` // octal permission bits, e.g. "0644"
	Modified string `json:"modified"`       // RFC 3339 UTC
}

// ListResult is list_directory's structured result.
type ListResult struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
}

func (c *callConn) listDirectory(ctx context.Context, _ *sdk.CallToolRequest, a PathArgs) *sdk.CallToolResult {
	dev, p, bad := c.resolve(ctx, a.Path)
	if bad != nil {
		return bad
	}
	res, err := c.run(ctx, dev, protocol.KindListDir, protocol.PathArgs{Path: p}, nil, nil)
	if err != nil {
		return callFailed(ctx, dev.DeviceID, err)
	}
	if !res.Outcome.OK {
		return outcomeFailed(dev.DeviceID, res, "")
	}
	r := ListResult{Path: p, Entries: make([]Entry, 0, len(res.Outcome.Entries))}
	var b strings.Builder
	for _, fi := range res.Outcome.Entries {
		e := entryOf(fi)
		r.Entries = append(r.Entries, e)
		fmt.Fprintf(&b, "%s\t%s\t%d\t%s\t%s\n", e.Kind, orDash(e.Mode), e.Size, e.Modified, e.Name)
	}
	text := fmt.Sprintf("%s: %s\n%s", p, words.Count(len(r.Entries), "entry", "entries"), b.String())
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: r}
}

func (c *callConn) fileInfo(ctx context.Context, _ *sdk.CallToolRequest, a PathArgs) *sdk.CallToolResult {
	dev, p, bad := c.resolve(ctx, a.Path)
	if bad != nil {
		return bad
	}
	res, err := c.run(ctx, dev, protocol.KindFileInfo, protocol.PathArgs{Path: p}, nil, nil)
	if err != nil {
		return callFailed(ctx, dev.DeviceID, err)
	}
	if !res.Outcome.OK || res.Outcome.Info == nil {
		return outcomeFailed(dev.DeviceID, res, "")
	}
	e := entryOf(*res.Outcome.Info)
	text := fmt.Sprintf("%s: %s, %s, mode %s, modified %s", e.Path, e.Kind, words.Bytes(e.Size), orDash(e.Mode), e.Modified)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: e}
}

func entryOf(fi protocol.FileInfo) Entry {
	e := Entry{Path: fi.Path, Name: baseName(fi.Path), Kind: string(fi.Kind), Size: fi.Size,
		Modified: time.UnixMilli(fi.MtimeMs).UTC().Format(time.RFC3339)}
	if fi.Mode != nil {
		e.Mode = fmt.Sprintf("%04o", *fi.Mode&0o7777)
	}
	return e
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 && i < len(p)-1 {
		return p[i+1:]
	}
	return p
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resolve finds the device and makes p absolute on it; a result with
// isError when either cannot be done.
func (c *callConn) resolve(ctx context.Context, p string) (api.Device, string, *sdk.CallToolResult) {
	if dev, ok := c.target.named(); ok && strings.HasPrefix(p, "/") {
		abs, err := devicePath(dev, p) // absolute: the workspace root is not needed
		if err != nil {
			return dev, "", invalid("path: %v", err)
		}
		return dev, abs, nil
	}
	dev, err := c.target.device(ctx)
	if err != nil {
		return dev, "", callFailed(ctx, "", err)
	}
	abs, err := devicePath(dev, p)
	if err != nil {
		return dev, "", invalid("path: %v", err)
	}
	return dev, abs, nil
}
