"""plasmafs.fsspec: `pfs://` for fsspec and the Python data stack (pandas, pyarrow, dask),
over the asyncio client; registered by entry point. Needs the `fsspec` extra."""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
