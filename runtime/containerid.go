package runtime

import (
	"fmt"
	"strings"
	"unicode"
)

// ContainerID names a container on a runtime: the runtime's type and the
// runtime's own ID, written "type://id" as in the API's
// ContainerStatus.ContainerID.
type ContainerID struct {
	Type string
	ID   string
}

// ParseContainerID parses "type://id". It rejects an empty string, a missing
// or repeated "://" (the kubelet rejects the latter too), an empty type or
// ID, and whitespace or control characters anywhere.
func ParseContainerID(s string) (ContainerID, error) {
	typ, id, ok := strings.Cut(s, "://")
	if !ok {
		return ContainerID{}, fmt.Errorf("invalid container ID %q: want type://id: %w", s, ErrInvalidContainerID)
	}
	if typ == "" || id == "" {
		return ContainerID{}, fmt.Errorf("invalid container ID %q: empty type or id: %w", s, ErrInvalidContainerID)
	}
	if strings.Contains(id, "://") {
		return ContainerID{}, fmt.Errorf("invalid container ID %q: more than one \"://\": %w", s, ErrInvalidContainerID)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return ContainerID{}, fmt.Errorf("invalid container ID %q: whitespace or control character at %d: %w", s, i, ErrInvalidContainerID)
	}
	return ContainerID{Type: typ, ID: id}, nil
}

// String returns "type://id", or "" for the zero ContainerID.
func (c ContainerID) String() string {
	if c.IsEmpty() {
		return ""
	}
	return c.Type + "://" + c.ID
}

// IsEmpty reports whether c is the zero ContainerID.
func (c ContainerID) IsEmpty() bool { return c == ContainerID{} }

// MarshalText implements encoding.TextMarshaler.
func (c ContainerID) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; "" gives the zero ID.
func (c *ContainerID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = ContainerID{}
		return nil
	}
	id, err := ParseContainerID(string(b))
	if err != nil {
		return err
	}
	*c = id
	return nil
}
