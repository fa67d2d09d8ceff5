"""ComponentResources of the serving stacks, and the helpers both clouds share (Helm releases, model server objects)."""
