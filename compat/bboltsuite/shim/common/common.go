// Package common is rivet's stand-in for the few names bbolt v1.5.0's
// black-box tests take from bbolt's internal/common package, written over
// rivet's public API (see ../../run.sh).
package common

import (
	"fmt"

	"github.com/rivetkv/rivet"
)

// Pgid is a page id.
type Pgid = rivet.Pgid

// MaxAllocSize is the largest allocation the tests expect to be able to
// make (bbolt's value on 64-bit platforms).
const MaxAllocSize = 0x7FFFFFFF

// Assert panics with the formatted message if condition is false.
func Assert(condition bool, msg string, v ...interface{}) {
	if !condition {
		panic(fmt.Sprintf("assertion failed: "+msg, v...))
	}
}
