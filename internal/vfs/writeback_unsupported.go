//go:build !linux

package vfs

import "errors"

// errWritebackUnsupported is StartWriteback's answer where the platform has
// no way to start writeback early.
var errWritebackUnsupported = errors.New("vfs: starting writeback early is not supported on this platform")
