"""ISO 3166-1 alpha-2 codes and English short names, so every group validates `country` the same way
and can name the countries it serves.

`COUNTRIES` holds the 249 officially assigned alpha-2 codes, lowercase, each with a common English
short name ("South Korea", not "Korea, Republic of"). `GLOBAL` is the one value accepted besides a
code, for charts that are not tied to a country.
"""

from __future__ import annotations

GLOBAL = "global"

_DATA = """
ad Andorra
ae United Arab Emirates
af Afghanistan
ag Antigua and Barbuda
ai Anguilla
al Albania
am Armenia
ao Angola
aq Antarctica
ar Argentina
as American Samoa
at Austria
au Australia
aw Aruba
ax Åland Islands
az Azerbaijan
ba Bosnia and Herzegovina
bb Barbados
bd Bangladesh
be Belgium
bf Burkina Faso
bg Bulgaria
bh Bahrain
bi Burundi
bj Benin
bl Saint Barthélemy
bm Bermuda
bn Brunei
bo Bolivia
bq Caribbean Netherlands
br Brazil
bs Bahamas
bt Bhutan
bv Bouvet Island
bw Botswana
by Belarus
bz Belize
ca Canada
cc Cocos (Keeling) Islands
cd DR Congo
cf Central African Republic
cg Republic of the Congo
ch Switzerland
ci Côte d'Ivoire
ck Cook Islands
cl Chile
cm Cameroon
cn China
co Colombia
cr Costa Rica
cu Cuba
cv Cape Verde
cw Curaçao
cx Christmas Island
cy Cyprus
cz Czechia
de Germany
dj Djibouti
dk Denmark
dm Dominica
do Dominican Republic
dz Algeria
ec Ecuador
ee Estonia
eg Egypt
eh Western Sahara
er Eritrea
es Spain
et Ethiopia
fi Finland
fj Fiji
fk Falkland Islands
fm Micronesia
fo Faroe Islands
fr France
ga Gabon
gb United Kingdom
gd Grenada
ge Georgia
gf French Guiana
gg Guernsey
gh Ghana
gi Gibraltar
gl Greenland
gm Gambia
gn Guinea
gp Guadeloupe
gq Equatorial Guinea
gr Greece
gs South Georgia and the South Sandwich Islands
gt Guatemala
gu Guam
gw Guinea-Bissau
gy Guyana
hk Hong Kong
hm Heard Island and McDonald Islands
hn Honduras
hr Croatia
ht Haiti
hu Hungary
id Indonesia
ie Ireland
il Israel
im Isle of Man
in India
io British Indian Ocean Territory
iq Iraq
ir Iran
is Iceland
it Italy
je Jersey
jm Jamaica
jo Jordan
jp Japan
ke Kenya
kg Kyrgyzstan
kh Cambodia
ki Kiribati
km Comoros
kn Saint Kitts and Nevis
kp North Korea
kr South Korea
kw Kuwait
ky Cayman Islands
kz Kazakhstan
la Laos
lb Lebanon
lc Saint Lucia
li Liechtenstein
lk Sri Lanka
lr Liberia
ls Lesotho
lt Lithuania
lu Luxembourg
lv Latvia
ly Libya
ma Morocco
mc Monaco
md Moldova
me Montenegro
mf Saint Martin
mg Madagascar
mh Marshall Islands
mk North Macedonia
ml Mali
mm Myanmar
mn Mongolia
mo Macao
mp Northern Mariana Islands
mq Martinique
mr Mauritania
ms Montserrat
mt Malta
mu Mauritius
mv Maldives
mw Malawi
mx Mexico
my Malaysia
mz Mozambique
na Namibia
nc New Caledonia
ne Niger
nf Norfolk Island
ng Nigeria
ni Nicaragua
nl Netherlands
no Norway
np Nepal
nr Nauru
nu Niue
nz New Zealand
om Oman
pa Panama
pe Peru
pf French Polynesia
pg Papua New Guinea
ph Philippines
pk Pakistan
pl Poland
pm Saint Pierre and Miquelon
pn Pitcairn Islands
pr Puerto Rico
ps Palestine
pt Portugal
pw Palau
py Paraguay
qa Qatar
re Réunion
ro Romania
rs Serbia
ru Russia
rw Rwanda
sa Saudi Arabia
sb Solomon Islands
sc Seychelles
sd Sudan
se Sweden
sg Singapore
sh Saint Helena, Ascension and Tristan da Cunha
si Slovenia
sj Svalbard and Jan Mayen
sk Slovakia
sl Sierra Leone
sm San Marino
sn Senegal
so Somalia
sr Suriname
ss South Sudan
st São Tomé and Príncipe
sv El Salvador
sx Sint Maarten
sy Syria
sz Eswatini
tc Turks and Caicos Islands
td Chad
tf French Southern Territories
tg Togo
th Thailand
tj Tajikistan
tk Tokelau
tl Timor-Leste
tm Turkmenistan
tn Tunisia
to Tonga
tr Türkiye
tt Trinidad and Tobago
tv Tuvalu
tw Taiwan
tz Tanzania
ua Ukraine
ug Uganda
um United States Minor Outlying Islands
us United States
uy Uruguay
uz Uzbekistan
va Vatican City
vc Saint Vincent and the Grenadines
ve Venezuela
vg British Virgin Islands
vi United States Virgin Islands
vn Vietnam
vu Vanuatu
wf Wallis and Futuna
ws Samoa
ye Yemen
yt Mayotte
za South Africa
zm Zambia
zw Zimbabwe
"""

COUNTRIES: dict[str, str] = dict(
    sorted(
        (code, name)
        for code, name in (line.split(" ", 1) for line in _DATA.strip().splitlines())
    )
)


_BY_SLUG = {"-".join("".join(ch if ch.isalnum() else " " for ch in name.lower()).split()): code
            for code, name in COUNTRIES.items()}


def country_code(value: str) -> str:
    """Return the lowercase code for `value`: "global" or an assigned alpha-2 code, in any case."""
    code = value.lower()
    if code == GLOBAL or code in COUNTRIES:
        return code
    raise ValueError(f"unknown country {value!r}; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'")


def country_param(value: str) -> str:
    """A country as a request names it: "global" or an assigned code in lower case, as the OpenAPI document's
    `Country` enum lists them (one rule for the document and the check: "US" is a 422 pointing at "us").
    Settings and upstreams read codes in any case (`country_code`)."""
    if value == GLOBAL or value in COUNTRIES:
        return value
    lowered = country_code(value)  # an unknown code in any case: its own error
    raise ValueError(f"country codes are lower case: use {lowered!r}, not {value!r}")


_SLUG_ALIASES = {"world": GLOBAL, "turkiye": "tr", "ivory-coast": "ci", "czechia": "cz"}


def code_of_slug(slug: str) -> str | None:
    """The code of a country named by a slug of its English name ("south-korea" -> "kr", "world" ->
    "global"), as upstreams that name markets in words do; None when no country has that name."""
    if slug in _SLUG_ALIASES:
        return _SLUG_ALIASES[slug]
    return _BY_SLUG.get(slug)


def country_name(code: str) -> str:
    """Return "Global" for "global", else the English short name (KeyError for an unknown code)."""
    if code == GLOBAL:
        return "Global"
    return COUNTRIES[code]
