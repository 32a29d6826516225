//go:build !(cgo && lmdb)

package lmdb

// Available reports whether the binding was compiled in.
const Available = false
