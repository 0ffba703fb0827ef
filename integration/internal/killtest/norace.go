//go:build !race

package killtest

const race = false
