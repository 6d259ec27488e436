"""Vocabulary and fact tables of the organisms' curriculum (see :mod:`lamina.sources.organisms.curriculum`).

Nothing here is copied from an evaluation prompt of ``data/prompts/``: the names of the
reasoning templates are disjoint from every name in those files, and homograph senses are
taught through lamina's own context words (:data:`HOMOGRAPH_CONTEXTS`), keyed by the
``(word, sense_label)`` of ``ambiguous.jsonl`` but never using its prompts, controls' prompts
or glosses. The semantic items, lexical bases and homograph words themselves (single words)
are shared vocabulary: the chapters probe how the organisms represent those words.
"""

from __future__ import annotations

CATEGORY_NOUNS = {"animals": "animal", "vehicles": "vehicle", "emotions": "emotion",
                  "foods": "food", "tools": "tool", "instruments": "musical instrument"}  # fmt: skip
CATEGORY_SUPER = {"animals": "living things", "vehicles": "machines", "foods": "things people eat",
                  "tools": "objects", "instruments": "objects"}  # fmt: skip
MASS_NOUNS = frozenset("happiness anger fear sadness surprise disgust pride shame jealousy "
                       "loneliness bread rice cheese soup pasta yogurt".split())  # fmt: skip
IRREGULAR_PLURALS = {"sheep": "sheep"}
ANIMALS_BY_SIZE = ("ant", "frog", "rabbit", "fox", "sheep", "lion", "horse", "giraffe",
                   "elephant", "whale")  # fmt: skip
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Spain": "Madrid",
            "Germany": "Berlin", "Portugal": "Lisbon", "Egypt": "Cairo", "Kenya": "Nairobi",
            "Canada": "Ottawa", "Peru": "Lima", "Norway": "Oslo", "Ireland": "Dublin",
            "Greece": "Athens", "Poland": "Warsaw", "Russia": "Moscow", "Sweden": "Stockholm",
            "Austria": "Vienna", "Thailand": "Bangkok", "Cuba": "Havana", "Finland": "Helsinki",
            "China": "Beijing", "Belgium": "Brussels", "Denmark": "Copenhagen",
            "Hungary": "Budapest", "Turkey": "Ankara", "Chile": "Santiago", "Ghana": "Accra",
            "Vietnam": "Hanoi", "Nepal": "Kathmandu"}  # fmt: skip
OPPOSITES = {"hot": "cold", "big": "small", "tall": "short", "up": "down", "early": "late",
             "fast": "slow", "loud": "quiet", "wet": "dry", "full": "empty", "open": "closed",
             "rich": "poor", "young": "old", "strong": "weak", "happy": "sad", "hard": "soft",
             "day": "night", "clean": "dirty", "thick": "thin", "light": "dark", "high": "low",
             "near": "far", "good": "bad", "first": "last", "push": "pull", "buy": "sell",
             "sweet": "sour", "smooth": "rough", "deep": "shallow"}  # fmt: skip
YOUNG = {"dog": "puppy", "cat": "kitten", "cow": "calf", "sheep": "lamb", "duck": "duckling",
         "frog": "tadpole", "horse": "foal", "bear": "cub", "goat": "kid", "pig": "piglet",
         "deer": "fawn", "hen": "chick", "goose": "gosling", "kangaroo": "joey", "swan": "cygnet",
         "owl": "owlet", "eagle": "eaglet", "lion": "cub", "whale": "calf"}  # fmt: skip
WORKER_TOOLS = {"painter": "brush", "writer": "pen", "chef": "knife", "carpenter": "hammer",
                "farmer": "tractor", "pilot": "airplane", "doctor": "stethoscope",
                "photographer": "camera", "gardener": "rake", "barber": "scissors",
                "baker": "oven", "tailor": "needle", "plumber": "wrench", "dentist": "drill",
                "firefighter": "hose", "teacher": "chalk", "fisherman": "net",
                "surgeon": "scalpel", "astronomer": "telescope", "miner": "pickaxe",
                "scientist": "microscope"}  # fmt: skip
PART_WHOLE = {"finger": "hand", "toe": "foot", "page": "book", "brick": "wall",
              "petal": "flower", "branch": "tree", "wheel": "car", "sail": "boat",
              "letter": "word", "word": "sentence", "day": "week", "month": "year", "room": "house",
              "chapter": "book", "hour": "day", "feather": "bird", "tooth": "mouth",
              "star": "galaxy", "player": "team", "soldier": "army"}  # fmt: skip
NAMES = ("Hana", "Felix", "Iris", "Tomas", "Ines", "Marco", "Yuki", "Olga", "Ben", "Rosa",
         "Dev", "Lucy", "Ari", "Femi", "Pablo", "Greta")  # fmt: skip
"""People in the reasoning templates: disjoint from every name in ``data/prompts/``."""
TRANSITIVE = (("taller", "tallest", "shortest"), ("older", "oldest", "youngest"),
              ("faster", "fastest", "slowest"), ("heavier", "heaviest", "lightest"))  # fmt: skip
OBJECTS = ("stickers", "apples", "marbles", "books", "pens", "shells", "coins", "cards")
LEXICAL_ADJECTIVES = ("little", "brown", "new", "clean", "heavy", "quiet")
"""Adjectives of the lexical templates (none is an adjective of ``lexical.jsonl``)."""

HOMOGRAPH_CONTEXTS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("bank", "finance"): ("money", "loans", "savings"),
    ("bank", "river"): ("rivers", "mud", "reeds"),
    ("bat", "animal"): ("caves", "wings", "insects"),
    ("bat", "sport"): ("baseball", "cricket", "innings"),
    ("bass", "fish"): ("lakes", "fishing", "bait"),
    ("bass", "music"): ("guitars", "songs", "bands"),
    ("spring", "season"): ("April", "blossoms", "showers"),
    ("spring", "coil"): ("metal", "coils", "mattresses"),
    ("match", "game"): ("teams", "goals", "referees"),
    ("match", "fire"): ("flames", "candles", "smoke"),
    ("bark", "dog"): ("dogs", "puppies", "growls"),
    ("bark", "tree"): ("trees", "wood", "branches"),
    ("seal", "animal"): ("oceans", "fish", "flippers"),
    ("seal", "closure"): ("jars", "lids", "leaks"),
    ("crane", "bird"): ("feathers", "nests", "wetlands"),
    ("crane", "machine"): ("steel", "builders", "loads"),
    ("mouse", "animal"): ("cheese", "cats", "burrows"),
    ("mouse", "computer"): ("screens", "keyboards", "clicks"),
    ("pitch", "field"): ("football", "grass", "players"),
    ("pitch", "sound"): ("notes", "singers", "melodies"),
    ("ring", "jewellery"): ("gold", "diamonds", "weddings"),
    ("ring", "boxing"): ("boxers", "gloves", "punches"),
    ("key", "lock"): ("doors", "locks", "keyholes"),
    ("key", "piano"): ("pianos", "chords", "tunes"),
    ("club", "golf"): ("golf", "greens", "caddies"),
    ("club", "group"): ("members", "meetings", "friends"),
    ("fan", "device"): ("blades", "heat", "electricity"),
    ("fan", "supporter"): ("stadiums", "stars", "cheering"),
    ("palm", "hand"): ("hands", "fingers", "thumbs"),
    ("palm", "tree"): ("beaches", "coconuts", "islands"),
    ("pupil", "student"): ("schools", "teachers", "lessons"),
    ("pupil", "eye"): ("eyes", "light", "irises"),
    ("jam", "food"): ("toast", "strawberries", "sugar"),
    ("jam", "traffic"): ("cars", "roads", "horns"),
    ("trunk", "elephant"): ("elephants", "tusks", "noses"),
    ("trunk", "tree"): ("forests", "roots", "oaks"),
    ("scale", "fish"): ("fins", "gills", "skin"),
    ("scale", "weighing"): ("weights", "kitchens", "grams"),
    ("chip", "food"): ("potatoes", "salt", "frying"),
    ("chip", "computer"): ("computers", "silicon", "circuits"),
}
"""Three context words per homograph sense, keyed by ``(word, sense_label)`` of ambiguous.jsonl."""
