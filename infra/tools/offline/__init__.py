"""The offline preview: the real program under Pulumi's mock runtime, recorded; its digest and rendering."""
