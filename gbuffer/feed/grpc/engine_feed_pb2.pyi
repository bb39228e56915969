from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_NONE: _ClassVar[Compression]
    COMPRESSION_ZLIB: _ClassVar[Compression]

class Format(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORMAT_RGB24: _ClassVar[Format]
    FORMAT_JPEG: _ClassVar[Format]
COMPRESSION_NONE: Compression
COMPRESSION_ZLIB: Compression
FORMAT_RGB24: Format
FORMAT_JPEG: Format

class EngineMessage(_message.Message):
    __slots__ = ("open", "frame", "control")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    open: Open
    frame: Frame
    control: Control
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., frame: _Optional[_Union[Frame, _Mapping]] = ..., control: _Optional[_Union[Control, _Mapping]] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ("name", "width", "height", "fps", "compression", "rgb", "output")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FPS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    RGB_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    width: int
    height: int
    fps: float
    compression: Compression
    rgb: bool
    output: OutputRequest
    def __init__(self, name: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., fps: _Optional[float] = ..., compression: _Optional[_Union[Compression, str]] = ..., rgb: _Optional[bool] = ..., output: _Optional[_Union[OutputRequest, _Mapping]] = ...) -> None: ...

class OutputRequest(_message.Message):
    __slots__ = ("renderer", "width", "height", "prompt", "schedule", "format", "quality")
    RENDERER_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    renderer: str
    width: int
    height: int
    prompt: str
    schedule: str
    format: Format
    quality: int
    def __init__(self, renderer: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., prompt: _Optional[str] = ..., schedule: _Optional[str] = ..., format: _Optional[_Union[Format, str]] = ..., quality: _Optional[int] = ...) -> None: ...

class GBuffer(_message.Message):
    __slots__ = ("albedo", "depth", "metallic", "normal", "roughness")
    ALBEDO_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    METALLIC_FIELD_NUMBER: _ClassVar[int]
    NORMAL_FIELD_NUMBER: _ClassVar[int]
    ROUGHNESS_FIELD_NUMBER: _ClassVar[int]
    albedo: bytes
    depth: bytes
    metallic: bytes
    normal: bytes
    roughness: bytes
    def __init__(self, albedo: _Optional[bytes] = ..., depth: _Optional[bytes] = ..., metallic: _Optional[bytes] = ..., normal: _Optional[bytes] = ..., roughness: _Optional[bytes] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("index", "timestamp_us", "gbuffer", "rgb", "input", "meta_json")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_US_FIELD_NUMBER: _ClassVar[int]
    GBUFFER_FIELD_NUMBER: _ClassVar[int]
    RGB_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    META_JSON_FIELD_NUMBER: _ClassVar[int]
    index: int
    timestamp_us: int
    gbuffer: GBuffer
    rgb: bytes
    input: PlayerInput
    meta_json: bytes
    def __init__(self, index: _Optional[int] = ..., timestamp_us: _Optional[int] = ..., gbuffer: _Optional[_Union[GBuffer, _Mapping]] = ..., rgb: _Optional[bytes] = ..., input: _Optional[_Union[PlayerInput, _Mapping]] = ..., meta_json: _Optional[bytes] = ...) -> None: ...

class Control(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class PlayerInput(_message.Message):
    __slots__ = ("steer", "throttle", "brake", "reset", "handbrake")
    STEER_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_FIELD_NUMBER: _ClassVar[int]
    BRAKE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    HANDBRAKE_FIELD_NUMBER: _ClassVar[int]
    steer: float
    throttle: float
    brake: float
    reset: bool
    handbrake: bool
    def __init__(self, steer: _Optional[float] = ..., throttle: _Optional[float] = ..., brake: _Optional[float] = ..., reset: _Optional[bool] = ..., handbrake: _Optional[bool] = ...) -> None: ...

class StudioMessage(_message.Message):
    __slots__ = ("welcome", "styled", "input", "event", "channel")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    STYLED_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    styled: StyledFrame
    input: PlayerInput
    event: Event
    channel: ChannelMessage
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., styled: _Optional[_Union[StyledFrame, _Mapping]] = ..., input: _Optional[_Union[PlayerInput, _Mapping]] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., channel: _Optional[_Union[ChannelMessage, _Mapping]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("source", "limits", "session_id", "owner_key", "watch_path", "watch_key", "renderer", "width", "height", "format")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    WATCH_PATH_FIELD_NUMBER: _ClassVar[int]
    WATCH_KEY_FIELD_NUMBER: _ClassVar[int]
    RENDERER_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    source: str
    limits: Limits
    session_id: str
    owner_key: str
    watch_path: str
    watch_key: str
    renderer: str
    width: int
    height: int
    format: Format
    def __init__(self, source: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., session_id: _Optional[str] = ..., owner_key: _Optional[str] = ..., watch_path: _Optional[str] = ..., watch_key: _Optional[str] = ..., renderer: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., format: _Optional[_Union[Format, str]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_fps", "max_pixels")
    MAX_FPS_FIELD_NUMBER: _ClassVar[int]
    MAX_PIXELS_FIELD_NUMBER: _ClassVar[int]
    max_fps: float
    max_pixels: int
    def __init__(self, max_fps: _Optional[float] = ..., max_pixels: _Optional[int] = ...) -> None: ...

class StyledFrame(_message.Message):
    __slots__ = ("index", "width", "height", "format", "data", "missed", "render_ms", "studio_ms")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    RENDER_MS_FIELD_NUMBER: _ClassVar[int]
    STUDIO_MS_FIELD_NUMBER: _ClassVar[int]
    index: int
    width: int
    height: int
    format: Format
    data: bytes
    missed: int
    render_ms: float
    studio_ms: float
    def __init__(self, index: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., format: _Optional[_Union[Format, str]] = ..., data: _Optional[bytes] = ..., missed: _Optional[int] = ..., render_ms: _Optional[float] = ..., studio_ms: _Optional[float] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("event", "session_id")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    event: str
    session_id: str
    def __init__(self, event: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ChannelMessage(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class ScheduleRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SetScheduleRequest(_message.Message):
    __slots__ = ("session_id", "schedule", "from_now")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    FROM_NOW_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    schedule: str
    from_now: bool
    def __init__(self, session_id: _Optional[str] = ..., schedule: _Optional[str] = ..., from_now: _Optional[bool] = ...) -> None: ...

class ScheduleReply(_message.Message):
    __slots__ = ("json", "frame")
    JSON_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    json: str
    frame: int
    def __init__(self, json: _Optional[str] = ..., frame: _Optional[int] = ...) -> None: ...
