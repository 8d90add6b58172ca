"""kombu's filesystem transport (the embedded broker) with atomic message files.

kombu writes a message by creating its file and then writing it, while a consumer lists the folder and takes any
`*.<queue>.msg` file it sees: it can take a file before its content is written, fail to decode it and stop the
worker ("Unrecoverable error: JSONDecodeError"). Here a message is written under a name no consumer matches and
renamed into place, which is atomic on one file system.
"""

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
