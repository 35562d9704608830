package redis

import (
	"embed"
	"strings"
)

// Every script is a .lua file of this package, embedded here, that says
// at its top what it takes (KEYS, ARGV) and what it returns. Its script
// value is a package variable beside the code that runs it, shared by
// every Store: the SHA-1 is computed once, and rueidis falls back from
// EVALSHA to EVAL on a node that has not seen the script. Whether the
// client may resend a call whose reply was lost is said there too.
//
//go:embed *.lua
var luaFiles embed.FS

// lua is the source of the named files, joined: a script that uses a
// library (record.lua, stock_write.lua) names the library first.
func lua(names ...string) string {
	var b strings.Builder
	for _, name := range names {
		src, err := luaFiles.ReadFile(name)
		if err != nil {
			panic(err) // a name that is not embedded; the package's first test finds it
		}
		b.Write(src)
	}
	return b.String()
}
