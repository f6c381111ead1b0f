# plugins/template is built by tests/plugins/local.mk (it is not installed)
