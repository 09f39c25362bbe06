package claim

import (
	"errors"
	"fmt"
	"strings"
)

// ErrGroupProtocol is wrapped by the errors of a join the group's
// coordinator refuses with INCONSISTENT_GROUP_PROTOCOL: the group's members
// offer no partition assignment strategy in common with this member's.
var ErrGroupProtocol = errors.New("kafka: no assignment strategy in common with the group's members")

// GroupProtocol returns the error of a join refused with
// INCONSISTENT_GROUP_PROTOCOL (err, the client's error): it names the
// group, the strategies the member offered, and what to set, on one line.
func GroupProtocol(group string, offered []string, err error) error {
	q := make([]string, len(offered))
	for i, s := range offered {
		q[i] = fmt.Sprintf("%q", s)
	}
	return fmt.Errorf("%w: group %q runs members that offer none of this member's strategies [%s]; "+
		"set Rebalance (or the client's strategies) to one every member of the group offers "+
		"(the sarama source's default is \"range\", the franz-go source's \"cooperative-sticky\"): %w",
		ErrGroupProtocol, group, strings.Join(q, " "), err)
}
