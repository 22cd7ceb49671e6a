"""The local cloud: Google's endpoints, a bucket, a registry and Spot VMs on this machine (local_cloud.cloud), the
same stand-ins the node twin and the launcher's tests use. `make local-cloud` starts it; gantry.local_world is how
the kit's verbs find it."""
