package testbroker

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLKafka is a kfake cluster that authenticates with SASL PLAIN and
// checks ACLs: a superuser administers it, and a user, allowed everything
// to begin with, is the one a test's pipeline connects as.
type ACLKafka struct {
	*kfake.Cluster
	User, Password string
	admin          sarama.ClusterAdmin
}

// KafkaWithACLs starts an ACLKafka, closed when t ends.
func KafkaWithACLs(t testing.TB) *ACLKafka {
	t.Helper()
	const user, password = "pipeline", "pw-acl-5e1f90-secret"
	all := func(rt kmsg.ACLResourceType, name string) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Operation: kmsg.ACLOperationAll, Allow: true}
	}
	c := Kafka(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(sarama.SASLTypePlaintext, "operator", "operator-secret"),
		kfake.User(sarama.SASLTypePlaintext, user, password,
			all(kmsg.ACLResourceTypeTopic, "*"), all(kmsg.ACLResourceTypeGroup, "*"),
			all(kmsg.ACLResourceTypeCluster, "kafka-cluster"), all(kmsg.ACLResourceTypeTransactionalId, "*")))
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), withSASL(SaramaConfig(), "operator", "operator-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return &ACLKafka{Cluster: c, User: user, Password: password, admin: admin}
}

// Config is SaramaConfig logging in as the cluster's user.
func (k *ACLKafka) Config() *sarama.Config { return withSASL(SaramaConfig(), k.User, k.Password) }

// Deny takes op on topic away from the cluster's user, as an operator's
// ACL change does: a DENY ACL, which overrides the user's ALLOW.
func (k *ACLKafka) Deny(t testing.TB, topic string, op sarama.AclOperation) {
	t.Helper()
	err := k.admin.CreateACLs([]*sarama.ResourceAcls{{
		Resource: sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResourcePatternType: sarama.AclPatternLiteral},
		Acls:     []*sarama.Acl{{Principal: "User:" + k.User, Host: "*", Operation: op, PermissionType: sarama.AclPermissionDeny}},
	}})
	if err != nil {
		t.Fatalf("denying operation %v on topic %q: %v", op, topic, err)
	}
}

// Grant gives op on topic back to the cluster's user: it deletes the DENY
// ACL Deny created.
func (k *ACLKafka) Grant(t testing.TB, topic string, op sarama.AclOperation) {
	t.Helper()
	principal, host := "User:"+k.User, "*"
	matched, err := k.admin.DeleteACL(sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &topic,
		ResourcePatternTypeFilter: sarama.AclPatternLiteral, Principal: &principal, Host: &host,
		Operation: op, PermissionType: sarama.AclPermissionDeny}, false)
	if err != nil || len(matched) != 1 {
		t.Fatalf("granting operation %v on topic %q back: %d ACLs deleted (%v), want 1", op, topic, len(matched), err)
	}
}

func withSASL(c *sarama.Config, user, password string) *sarama.Config {
	c.Net.SASL.Enable = true
	c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	c.Net.SASL.User, c.Net.SASL.Password = user, password
	return c
}
