from infra.providers.schema import has_input, resource_input_class, unknown_properties

SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"


def test_known_nested_properties_pass():
    inputs = {
        "bucket": "b",
        "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}, "bucketKeyEnabled": True}],
    }
    assert unknown_properties(SSE, inputs) == []


def test_unknown_nested_property_is_found_with_its_path_and_a_suggestion():
    inputs = {"bucket": "b", "rules": [{"applyServerSideEncryptionByDefault": {"kmsMasterKeyIdd": "k"}}]}
    [found] = unknown_properties(SSE, inputs)
    assert found.message() == (
        "unknown input property 'rules[0].applyServerSideEncryptionByDefault.kmsMasterKeyIdd' "
        "(did you mean 'kmsMasterKeyId'?)"
    )


def test_snake_case_keys_are_not_wire_names():
    [found] = unknown_properties("aws:ec2/launchTemplate:LaunchTemplate", {"metadata_options": {}})
    assert found.suggestion == "metadataOptions"


def test_map_values_are_free_form_but_typed_below():
    assert unknown_properties("aws:s3/bucket:Bucket", {"tags": {"anything:goes": "x"}}) == []


def test_resource_args_classes_resolve_even_when_the_name_is_taken():
    # s3.BucketVersioningArgs is a nested input of Bucket; the resource's own is BucketVersioningInitArgs.
    assert resource_input_class("aws:s3/bucketVersioning:BucketVersioning").__name__ == "BucketVersioningInitArgs"
    assert has_input("aws:kms/key:Key", "tags") and not has_input("aws:kms/alias:Alias", "tags")
    assert resource_input_class("aws:s3/noSuchThing:NoSuchThing") is None


def test_kubernetes_resources_are_covered_too():
    found = unknown_properties(
        "kubernetes:apps/v1:Deployment", {"spec": {"replicas": 1, "template": {"spec": {"containerz": []}}}}
    )
    assert [f.path for f in found] == ["spec.template.spec.containerz"]
