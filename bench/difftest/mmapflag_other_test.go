//go:build !linux

package difftest

// mmapFlag is a DB.MmapFlags value: none where MAP_POPULATE is Linux's.
const mmapFlag = 0
