"""/radio settings: the directory's countries, tags and size, and the monitor's limits, pace and timeouts."""

from __future__ import annotations

from chartgw.core import config

NAME = "radio"

# --- settings (the group's; `chartgw.groups.radio` lists them) ----------------------------------------

COUNTRIES_SETTING = config.Setting("RADIO_COUNTRIES", "us,gb,de,fr,kr,jp",
                                   "countries whose stations the directory crawl lists (ISO alpha-2)", config.storefronts)
TAGS_SETTING = config.Setting("RADIO_TAGS", "top 40,charts",
                              "directory tags whose stations are listed too (comma-separated, exact tags)",
                              config.comma_list)
DIRECTORY_LIMIT_SETTING = config.Setting("RADIO_DIRECTORY_LIMIT", "100",
                                         "stations asked of the directory per country and per tag, most clicked first",
                                         config.bounded_int(1, 10_000))
MONITOR_LIMIT_SETTING = config.Setting("RADIO_MONITOR_LIMIT", "50",
                                       "stations the monitor watches: the most clicked of each country in turn",
                                       config.bounded_int(1, 2000))
SILENCE_SETTING = config.Setting("RADIO_SILENCE_SECONDS", "300",
                                 "a play whose station has not been heard for this long is not current",
                                 config.seconds)
POLL_SETTING = config.Setting("RADIO_POLL_SECONDS", "20", "pause between two now-playing readings of a station",
                              config.seconds)
ICY_MODE_SETTING = config.Setting("RADIO_ICY_MODE", "poll",
                                  "ICY-only stations: poll (read to the first metadata block and hang up) or stream "
                                  "(stay connected, exact change times, costs the stream's bandwidth)",
                                  config.choice("poll", "stream"))
BACKOFF_MAX_SETTING = config.Setting("RADIO_BACKOFF_MAX_SECONDS", "900", "longest wait before retrying a failing station",
                                     config.seconds)
READ_TIMEOUT_SETTING = config.Setting("RADIO_READ_TIMEOUT_SECONDS", "15",
                                      "how long one reading may take (connect, status page, first ICY block)",
                                      config.seconds)
SETTINGS = (COUNTRIES_SETTING, TAGS_SETTING, DIRECTORY_LIMIT_SETTING, MONITOR_LIMIT_SETTING, SILENCE_SETTING,
            POLL_SETTING, ICY_MODE_SETTING, BACKOFF_MAX_SETTING, READ_TIMEOUT_SETTING)
