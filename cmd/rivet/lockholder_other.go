//go:build !unix

package main

// lockHolder names the process holding a lock on path where the OS can
// tell; on this platform it cannot, and the message goes without a name.
func lockHolder(string) string { return "" }
