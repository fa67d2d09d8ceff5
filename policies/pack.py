"""The explicit registration list of the pack: every rule, in the order reports list them.

Enforcement is the rule's own (mandatory for safety and cost, advisory where judgement is needed);
the pack config can override any rule's level, as `pulumi preview --policy-pack-config` allows.
"""

from __future__ import annotations

from policies.model import Rule
from policies.rules.cost import instance_types_have_catalog_price, stack_hourly_cost_under_ceiling
from policies.rules.everywhere import (
    block_devices_encrypted,
    gcp_instances_without_public_ip,
    gcp_project_grants_without_broad_roles,
    iam_grants_without_privilege_escalation,
    ingress_not_open_to_the_internet,
    instance_metadata_requires_imdsv2,
    log_groups_have_retention,
    nodes_without_public_ip,
    resource_policies_grant_no_one_outside,
    roles_without_broad_managed_policies,
    security_groups_not_open_across_rules,
    trust_policies_name_their_principals,
)
from policies.rules.registry import (
    gcs_buckets_encrypted_with_cmek,
    gcs_buckets_not_granted_to_the_public,
    gcs_buckets_not_public,
    gcs_buckets_versioned,
    registry_access_without_wildcards,
    registry_bucket_and_key_protected,
    registry_bucket_encrypted_with_kms,
    registry_bucket_public_access_blocked,
    registry_bucket_sends_events_to_eventbridge,
    registry_bucket_tls_only,
    registry_bucket_versioned,
    transfer_jobs_copy_models_only,
    transfer_jobs_never_delete,
)
from policies.rules.serving import (
    accelerator_node_pools_tainted,
    autoscalers_have_replica_bounds,
    eks_api_endpoint_restricted,
    eks_secrets_encrypted,
    gke_node_pools_without_public_ip,
    gke_nodes_private,
    gke_shielded_nodes,
    gke_workload_identity_enabled,
    model_servers_fit_their_devices,
    model_servers_fit_their_nodes,
    model_servers_scale_on_inference_signals,
    node_pools_have_limits,
    pods_without_host_access,
    serving_pools_use_serving_types,
    serving_registry_access_read_only,
)
from policies.rules.training import (
    efa_nodes_in_one_subnet,
    efa_on_every_network_card,
    efa_security_group_self_referencing,
    gcp_training_nodes_end_by_expiry,
    gcp_training_nodes_have_every_gpu_nic,
    gcp_training_nodes_in_compact_placement,
    gcp_training_resources_labelled_with_run,
    gcp_training_stack_has_run_guard,
    guard_role_scoped_to_run,
    lustre_associations_without_automatic_import,
    lustre_capacity_allowed_step,
    lustre_data_repository_paths_in_s3,
    lustre_final_backup_choice_explicit,
    lustre_in_same_az_as_nodes,
    lustre_linked_through_data_repository_associations,
    lustre_security_group_allows_lustre_ports,
    lustre_throughput_allowed_value,
    multi_interface_instances_without_public_ip,
    placement_group_matches_capacity_mode,
    placement_groups_use_cluster_strategy,
    run_guard_wired,
    training_compute_ends_with_the_run,
    training_expiry_within_max_lifetime,
    training_launch_templates_tag_what_they_launch,
    training_nodes_use_training_types,
    training_registry_writes_own_run_only,
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
    lustre_associations_without_automatic_import.RULE,
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
    training_compute_ends_with_the_run.RULE,
    guard_role_scoped_to_run.RULE,
    run_guard_wired.RULE,
    # training on GCP
    gcp_training_nodes_in_compact_placement.RULE,
    gcp_training_nodes_have_every_gpu_nic.RULE,
    gcp_training_nodes_end_by_expiry.RULE,
    gcp_training_resources_labelled_with_run.RULE,
    gcp_training_stack_has_run_guard.RULE,
    gcp_instances_without_public_ip.RULE,
    # registry
    registry_bucket_versioned.RULE,
    registry_bucket_public_access_blocked.RULE,
    registry_bucket_encrypted_with_kms.RULE,
    registry_bucket_tls_only.RULE,
    registry_bucket_and_key_protected.RULE,
    registry_bucket_sends_events_to_eventbridge.RULE,
    # registry mirror on GCP
    gcs_buckets_not_public.RULE,
    gcs_buckets_encrypted_with_cmek.RULE,
    gcs_buckets_versioned.RULE,
    gcs_buckets_not_granted_to_the_public.RULE,
    transfer_jobs_copy_models_only.RULE,
    transfer_jobs_never_delete.RULE,
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
    model_servers_fit_their_devices.RULE,
    model_servers_fit_their_nodes.RULE,
    pods_without_host_access.RULE,
    # role separation
    serving_pools_use_serving_types.RULE,
    training_nodes_use_training_types.RULE,
    # IAM least privilege
    registry_access_without_wildcards.RULE,
    serving_registry_access_read_only.RULE,
    training_registry_writes_own_run_only.RULE,
    trust_policies_name_their_principals.RULE,
    resource_policies_grant_no_one_outside.RULE,
    roles_without_broad_managed_policies.RULE,
    iam_grants_without_privilege_escalation.RULE,
    gcp_project_grants_without_broad_roles.RULE,
    # everywhere
    instance_metadata_requires_imdsv2.RULE,
    block_devices_encrypted.RULE,
    ingress_not_open_to_the_internet.RULE,
    security_groups_not_open_across_rules.RULE,
    nodes_without_public_ip.RULE,
    # cost
    stack_hourly_cost_under_ceiling.RULE,
    instance_types_have_catalog_price.RULE,
]
