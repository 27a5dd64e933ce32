"""The S3 gateway: an S3-compatible HTTP server over the cluster (`pfs gateway s3`,
`pfs-gateway`), built on aiohttp. Buckets are the directories under a root, keys are
paths below them; every request is verified with AWS Signature Version 4 and made as
the plasmafs user its access key belongs to. README's "S3 gateway" section says what
maps to what and what is not supported.
"""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
