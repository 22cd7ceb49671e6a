"""gantry: the launcher. Terraform for the infrastructure, google-cloud-compute for
preflight checks and the post-destroy inventory, and a CLI the Makefile calls.

    make preflight   # credentials, APIs, shape, quotas, $/h
    make apply       # preflight, then terraform init + apply of infra/
    make destroy     # terraform destroy, then proof that nothing is left billing
"""
