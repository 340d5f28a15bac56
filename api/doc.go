// Package api is the lane's HTTP API as data: the request, response and
// event types and the error codes, with no I/O. It is the one definition
// both ends use: the lane's handlers (package lane) write these shapes and
// every client (package client, the CLI, the MCP face) reads them.
// docs/api.md is its prose.
package api
