; Tyreworld: replace flat wheels with the spares from the boot, using the wrench, the jack and the pump.
(define (domain tyreworld)
  (:requirements :strips :typing)
  (:types tool wheel nut - obj
          obj hub container - object)
  (:constants wrench jack pump - tool)
  (:predicates
    (isopen ?c - container)
    (closed ?c - container)
    (unlocked ?c - container)
    (have ?x - obj)
    (in ?x - obj ?c - container)
    (loose ?n - nut ?h - hub)
    (tight ?n - nut ?h - hub)
    (on-ground ?h - hub)
    (not-on-ground ?h - hub)
    (fastened ?h - hub)
    (unfastened ?h - hub)
    (free ?h - hub)
    (on ?w - wheel ?h - hub)
    (inflated ?w - wheel)
    (not-inflated ?w - wheel)
    (intact ?w - wheel))

  (:action open
    :parameters (?c - container)
    :precondition (and (unlocked ?c) (closed ?c))
    :effect (and (isopen ?c) (not (closed ?c))))

  (:action close
    :parameters (?c - container)
    :precondition (and (isopen ?c))
    :effect (and (closed ?c) (not (isopen ?c))))

  (:action fetch
    :parameters (?x - obj ?c - container)
    :precondition (and (in ?x ?c) (isopen ?c))
    :effect (and (have ?x) (not (in ?x ?c))))

  (:action put-away
    :parameters (?x - obj ?c - container)
    :precondition (and (have ?x) (isopen ?c))
    :effect (and (in ?x ?c) (not (have ?x))))

  (:action loosen
    :parameters (?n - nut ?h - hub)
    :precondition (and (have wrench) (tight ?n ?h) (on-ground ?h))
    :effect (and (loose ?n ?h) (not (tight ?n ?h))))

  (:action tighten
    :parameters (?n - nut ?h - hub)
    :precondition (and (have wrench) (loose ?n ?h) (on-ground ?h))
    :effect (and (tight ?n ?h) (not (loose ?n ?h))))

  (:action jack-up
    :parameters (?h - hub)
    :precondition (and (have jack) (on-ground ?h))
    :effect (and (not-on-ground ?h) (not (on-ground ?h)) (not (have jack))))

  (:action jack-down
    :parameters (?h - hub)
    :precondition (and (not-on-ground ?h))
    :effect (and (on-ground ?h) (have jack) (not (not-on-ground ?h))))

  (:action undo
    :parameters (?n - nut ?h - hub)
    :precondition (and (have wrench) (not-on-ground ?h) (fastened ?h) (loose ?n ?h))
    :effect (and (have ?n) (unfastened ?h) (not (fastened ?h)) (not (loose ?n ?h))))

  (:action do-up
    :parameters (?n - nut ?h - hub)
    :precondition (and (have wrench) (not-on-ground ?h) (unfastened ?h) (have ?n))
    :effect (and (loose ?n ?h) (fastened ?h) (not (unfastened ?h)) (not (have ?n))))

  (:action remove-wheel
    :parameters (?w - wheel ?h - hub)
    :precondition (and (not-on-ground ?h) (unfastened ?h) (on ?w ?h))
    :effect (and (have ?w) (free ?h) (not (on ?w ?h))))

  (:action put-on-wheel
    :parameters (?w - wheel ?h - hub)
    :precondition (and (have ?w) (not-on-ground ?h) (unfastened ?h) (free ?h))
    :effect (and (on ?w ?h) (not (free ?h)) (not (have ?w))))

  (:action inflate
    :parameters (?w - wheel)
    :precondition (and (have pump) (not-inflated ?w) (intact ?w))
    :effect (and (inflated ?w) (not (not-inflated ?w)))))
