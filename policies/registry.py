"""The explicit registration list of the pack: every rule, in the order reports list them.

Enforcement is the rule's own (mandatory for safety and cost, advisory where judgement is needed);
the pack config can override any rule's level, as `pulumi preview --policy-pack-config` allows.
"""
from __future__ import annotations

from policies.model import Rule
from policies.rules import (
    accelerator_node_pools_tainted,
    autoscalers_have_replica_bounds,
    block_devices_encrypted,
    efa_nodes_in_one_subnet,
    efa_on_every_network_card,
    efa_security_group_self_referencing,
    eks_api_endpoint_restricted,
    eks_secrets_encrypted,
    gke_node_pools_without_public_ip,
    gke_nodes_private,
    gke_shielded_nodes,
    gke_workload_identity_enabled,
    guard_role_scoped_to_run,
    ingress_not_open_to_the_internet,
    instance_metadata_requires_imdsv2,
    instance_types_have_catalog_price,
    log_groups_have_retention,
    lustre_capacity_allowed_step,
    lustre_data_repository_paths_in_s3,
    lustre_final_backup_choice_explicit,
    lustre_in_same_az_as_nodes,
    lustre_linked_through_data_repository_associations,
    lustre_security_group_allows_lustre_ports,
    lustre_throughput_allowed_value,
    model_servers_scale_on_inference_signals,
    multi_interface_instances_without_public_ip,
    node_pools_have_limits,
    nodes_without_public_ip,
    placement_group_matches_capacity_mode,
    placement_groups_use_cluster_strategy,
    registry_access_without_wildcards,
    registry_bucket_and_key_protected,
    registry_bucket_encrypted_with_kms,
    registry_bucket_public_access_blocked,
    registry_bucket_sends_events_to_eventbridge,
    registry_bucket_tls_only,
    registry_bucket_versioned,
    serving_pools_use_serving_types,
    serving_registry_access_read_only,
    stack_hourly_cost_under_ceiling,
    training_expiry_within_max_lifetime,
    training_launch_templates_tag_what_they_launch,
    training_nodes_use_training_types,
    training_resources_carry_run_tags,
    training_resources_not_protected,
    training_stack_has_run_guard,
)

PACK_NAME = "mlinfra"

RULES: list[Rule] = [
    # fabric
    efa_on_every_network_card.RULE,
    efa_security_group_self_referencing.RULE,
    efa_nodes_in_one_subnet.RULE,
    placement_group_matches_capacity_mode.RULE,
    placement_groups_use_cluster_strategy.RULE,
    multi_interface_instances_without_public_ip.RULE,
    # FSx for Lustre
    lustre_capacity_allowed_step.RULE,
    lustre_throughput_allowed_value.RULE,
    lustre_linked_through_data_repository_associations.RULE,
    lustre_data_repository_paths_in_s3.RULE,
    lustre_security_group_allows_lustre_ports.RULE,
    lustre_in_same_az_as_nodes.RULE,
    # teardown safety
    training_resources_not_protected.RULE,
    lustre_final_backup_choice_explicit.RULE,
    log_groups_have_retention.RULE,
    training_resources_carry_run_tags.RULE,
    training_launch_templates_tag_what_they_launch.RULE,
    training_expiry_within_max_lifetime.RULE,
    training_stack_has_run_guard.RULE,
    guard_role_scoped_to_run.RULE,
    # registry
    registry_bucket_versioned.RULE,
    registry_bucket_public_access_blocked.RULE,
    registry_bucket_encrypted_with_kms.RULE,
    registry_bucket_tls_only.RULE,
    registry_bucket_and_key_protected.RULE,
    registry_bucket_sends_events_to_eventbridge.RULE,
    # serving
    eks_api_endpoint_restricted.RULE,
    eks_secrets_encrypted.RULE,
    gke_nodes_private.RULE,
    gke_node_pools_without_public_ip.RULE,
    gke_workload_identity_enabled.RULE,
    gke_shielded_nodes.RULE,
    accelerator_node_pools_tainted.RULE,
    node_pools_have_limits.RULE,
    autoscalers_have_replica_bounds.RULE,
    model_servers_scale_on_inference_signals.RULE,
    # role separation
    serving_pools_use_serving_types.RULE,
    training_nodes_use_training_types.RULE,
    # IAM least privilege
    registry_access_without_wildcards.RULE,
    serving_registry_access_read_only.RULE,
    # everywhere
    instance_metadata_requires_imdsv2.RULE,
    block_devices_encrypted.RULE,
    ingress_not_open_to_the_internet.RULE,
    nodes_without_public_ip.RULE,
    # cost
    stack_hourly_cost_under_ceiling.RULE,
    instance_types_have_catalog_price.RULE,
]
