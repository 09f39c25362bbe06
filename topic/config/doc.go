// Package config declares topics in YAML and wires pipelines through them.
//
// It works in three steps, each of which fails before anything is created:
//
//  1. [Parse] reads a YAML document with topic declarations under
//     topics.<name> and groups.<group>.topics.<name>, rejects unknown keys
//     and malformed values, fills in the documented defaults and validates
//     every field. Errors name the YAML path and the rule, for example
//     "topics.ingress.policies.balanced.queue_capacity must be ≥ 1".
//  2. [Resolve] takes the parsed [Config] and a [Wiring] (written in Go: which
//     pipeline subscribes to which topic, balanced in a consumer group or
//     broadcast, and which pipeline publishes to which topic), resolves every
//     reference, infers each topic's [topic.Mode] from how it is actually
//     subscribed to (impl_selection: force_mixed overrides the inference),
//     checks the broadcast ack_mode "all" rules and rejects cycles in the
//     wiring graph (pipeline → topic it publishes to → pipeline that
//     subscribes to it), naming the cycle. The result is a [Plan].
//  3. [Build] checks every topic against its backend's capabilities
//     ([topic.CheckCapabilities]), creates all topics on a [topic.Broker] at
//     once ([topic.Broker.CreateTopics]: all or none) and returns one
//     [topic.TopicSet] per pipeline, whose bindings carry the resolved
//     queue_on_full and ack_propagation settings.
//
// [Load] runs all three. The YAML reference, with every default, is in
// docs/topic-config.md.
package config
