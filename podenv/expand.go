package podenv

import "strings"

// Expand replaces each $(NAME) in s by the value lookup finds, as the
// kubelet's expansion does: a name lookup does not know stays as $(NAME),
// $$ becomes $, an unterminated $( and a $ before anything else are kept.
func Expand(s string, lookup func(name string) (string, bool)) string {
	i := strings.IndexByte(s, '$')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// Unterminated: "$(" is kept and the scan goes on, as
				// the kubelet's, so a later $$ still becomes $.
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ExpandAll expands every string of in; nil stays nil.
func ExpandAll(in []string, lookup func(name string) (string, bool)) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = Expand(s, lookup)
	}
	return out
}

// Lookup returns a lookup over vars, the last value of a name winning, for
// expanding a container's command and args with its final environment.
func Lookup(vars []Var) func(string) (string, bool) {
	m := make(map[string]string, len(vars))
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
